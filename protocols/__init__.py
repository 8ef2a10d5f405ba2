"""The only vocabulary shared between processes: the envelope (framing,
control messages) and the job payloads. Everything on the wire is a msgpack
map validated here; nothing else is ever unpacked."""
from protocols.envelope import PROTOCOL, ProtocolError, MessageType, pack, unpack
from protocols.schema import Field, Schema, validate

__all__ = ["PROTOCOL", "ProtocolError", "MessageType", "pack", "unpack", "Field", "Schema", "validate"]
