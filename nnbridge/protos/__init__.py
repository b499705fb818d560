"""Protobuf schemas of foreign formats (SMAUG, LBANN) and their generated code.

Each format has a folder (``smaug/``, ``lbann/``) with ``.proto`` files written
from the specs and the ``*_pb2.py`` that ``make protos`` generates from them.
"""
