"""nnbridge's own descriptor pool for SMAUG's schema.

SMAUG's generated Python modules (``smaug.core.types_pb2`` …) register the same symbols
(package ``smaug``: ``smaug.DataType``, ``smaug.GraphProto`` …) in protobuf's default pool;
keeping nnbridge's copies in a private pool lets both be imported in one process.
"""

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
