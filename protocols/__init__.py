"""The only vocabulary shared between processes: the envelope (framing and
limits), the control messages of the transport and the job payloads, each a
typed msgspec Struct decoded straight from the wire; nothing else is ever
unpacked."""
from autocomp_zmq.protocols.envelope import PROTOCOL, MessageType, ProtocolError, decode, encode

__all__ = ["PROTOCOL", "MessageType", "ProtocolError", "decode", "encode"]
