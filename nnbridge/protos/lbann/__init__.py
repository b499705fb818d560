"""Generated protobuf code for lbann (see ../generate.py)."""
