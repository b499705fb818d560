"""Generated protobuf code for smaug (see ../generate.py)."""
