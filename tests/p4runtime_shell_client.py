"""A p4runtime-shell session, run by build/tools/p4runtime-shell's python (its own venv: the shell
pins an older P4Runtime and protobuf than finsy's) for tests/test_p4runtime_shell.py.

    python p4runtime_shell_client.py ADDRESS DEVICE_ID ELECTION_ID [ROLE]

It connects as the shell does from its command line, without a pipeline config, so it works
from the P4Info the switch publishes; then it answers one JSON request per line on stdin with one
JSON line on stdout, each through the shell's own objects (TableEntry, CounterEntry, ...), so
that what the switch is sent is what the shell sends. What the shell prints goes to stderr.

Requests ("op"), each answered {"ok": ...} or {"error": CODE NAME, "errors": [[index, CODE
NAME], ...], "message": ...}:
  primary                       whether the switch told this client it is primary
  insert / modify / delete      table entries: {"entries": [{"table", "match": {field: text},
                                "action", "params": {name: text}, "priority"}]} in one write
                                request, with "atomicity" (CONTINUE_ON_ERROR by default)
  set_default                   {"table", "action", "params"}: the default entry modified
  entries                       {"table"}: the table's entries, [[{field: text}, action,
                                {param: int}], ...], in the order read
  counter                       {"name", "index"}: [packets, bytes]
  pipeline                      {"action", "source"}: SetForwardingPipelineConfig with the P4
                                Info the session works from and the program's source as the
                                device config (VERIFY_AND_COMMIT as the shell's own
                                set_fwd_pipe_config sends it, from files); COMMIT sends no config
  device_config                 the device config GetForwardingPipelineConfig hands back (text)
  packet_in                     {"timeout"}: the next PacketIn on the stream, {"payload": hex,
                                "metadata": {name: int}}, or None
  packet_out                    {"payload": hex, "metadata": {name: text}}: sh.PacketOut sent
  digest_entry                  {"digest", "max_timeout_ns", "max_list_size", "ack_timeout_ns"}:
                                sh.DigestEntry inserted
  digest_list                   {"timeout"}: the next DigestList, {"digest", "list_id", "data":
                                [[int, ...], ...]}, or None
  digest_ack                    {"digest", "list_id"}: a DigestListAck on the stream
  group                         {"kind": insert/modify/delete, "id", "replicas": [[port,
                                instance], ...]}: sh.MulticastGroupEntry written
  groups                        {"id"}: sh.MulticastGroupEntry read (0: every group), [[id,
                                [[port, instance], ...]], ...]
  session                       {"kind", "id", "replicas", "cos", "packet_length_bytes"}:
                                sh.CloneSessionEntry written
  sessions                      {"id"}: sh.CloneSessionEntry read (0: every session), [[id,
                                [[port, instance], ...], cos, packet_length_bytes], ...]
  member                        {"kind", "profile", "id", "action", "params"}:
                                sh.ActionProfileMember written
  members                       {"profile"}: its members read, [[id, action, {param: int}], ...]
  profile_group                 {"kind", "profile", "id", "members": [[member, weight], ...]}:
                                sh.ActionProfileGroup written
  profile_groups                {"profile"}: its groups read, [[id, [[member, weight], ...]], ...]
  indirect                      {"kind", "table", "match", "member" or "group"}: a table entry
                                naming an action profile member or group (sh.TableEntry's
                                member_id, group_id)
"""

import json
import sys
import tempfile
from pathlib import Path

import grpc
from google.protobuf import text_format
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

import p4runtime_sh.shell as sh
from p4runtime_sh.p4runtime import P4RuntimeException, P4RuntimeWriteException

ANSWERS = sys.stdout
sys.stdout = sys.stderr  # the shell prints what it parses and whom it connected as


def code_name(code):
    return code_pb2._CODE.values_by_number[code].name


def table_entry(spec, default=False):
    entry = sh.TableEntry(spec["table"])(action=spec["action"])
    for field, value in spec.get("match", {}).items():
        entry.match[field] = value
    for param, value in spec.get("params", {}).items():
        entry.action[param] = value
    entry.priority = spec.get("priority", 0)
    entry.is_default = default
    return entry


def write(kind, specs, atomicity="CONTINUE_ON_ERROR"):
    request = p4runtime_pb2.WriteRequest()
    request.atomicity = p4runtime_pb2.WriteRequest.Atomicity.Value(atomicity)
    for spec in specs:
        update = request.updates.add()
        update.type = p4runtime_pb2.Update.Type.Value(kind.upper())
        update.entity.table_entry.CopyFrom(table_entry(spec).msg())
    # Not the shell's own error parsing: its iterator over the per-update errors never ends when
    # one of them is OK, which P4Runtime says a failed batch reports for each update that succeeded.
    sh.client.write.__wrapped__(sh.client, request)


def write_errors(error):
    """The per-update errors (p4.v1.Error) a failed Write carries in its details."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            errors = []
            for detail in status.details:
                one = p4runtime_pb2.Error()
                detail.Unpack(one)
                errors.append(code_name(one.canonical_code))
            return errors
    return []


def field_text(field):
    kind = field.WhichOneof("field_match_type")
    value = getattr(field, kind)
    number = lambda b: int.from_bytes(b, "big")
    if kind == "lpm":
        return f"{number(value.value):#x}/{value.prefix_len}"
    if kind == "ternary":
        return f"{number(value.value):#x}&&&{number(value.mask):#x}"
    if kind == "range":
        return f"{number(value.low):#x}..{number(value.high):#x}"
    return f"{number(value.value):#x}"


def entries(table):
    info = sh.context.get_table(table)
    fields = {f.id: f.name for f in info.match_fields}
    out = []
    for e in sh.TableEntry(table).read():
        msg = e.msg()
        action = sh.context.get_name_from_id(msg.action.action.action_id)
        params = {sh.context.get_param_name(action, p.param_id): int.from_bytes(p.value, "big")
                  for p in msg.action.action.params}
        out.append([{fields[f.field_id]: field_text(f) for f in msg.match}, action, params])
    return out


def counter(name, index):
    c = sh.CounterEntry(name)
    c.index = index
    [read] = list(c.read())
    return [read.data.packet_count, read.data.byte_count]


def pipeline(action, source):
    if action == "VERIFY_AND_COMMIT":
        with tempfile.TemporaryDirectory() as tmp:
            p4info, program = Path(tmp) / "p4info.txt", Path(tmp) / "program.p4"
            p4info.write_text(text_format.MessageToString(sh.context.p4info))
            program.write_text(source)
            sh.client.set_fwd_pipe_config.__wrapped__(sh.client, str(p4info), str(program))
        return None
    request = p4runtime_pb2.SetForwardingPipelineConfigRequest(
        device_id=sh.client.device_id, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.Action.Value(action))
    request.election_id.high, request.election_id.low = sh.client.election_id
    if sh.client.role_name is not None:
        request.role = sh.client.role_name
    if action != "COMMIT":
        request.config.p4info.CopyFrom(sh.context.p4info)
        request.config.p4_device_config = source.encode()
    sh.client.stub.SetForwardingPipelineConfig(request)


def packet_in(timeout):
    msg = sh.client.get_stream_packet("packet", timeout=timeout)
    if msg is None:
        return None
    names = {m.id: m.name for m in sh.context.get_obj(sh.P4Type.controller_packet_metadata, "packet_in").metadata}
    return {"payload": msg.packet.payload.hex(),
            "metadata": {names[m.metadata_id]: int.from_bytes(m.value, "big") for m in msg.packet.metadata}}


def packet_out(payload, metadata):
    sh.PacketOut(payload=bytes.fromhex(payload), **metadata).send()


def packet_out_raw(payload, metadata):
    """A PacketOut as given, [(id, value)] for its metadata: the shell's own checks names, so
    it cannot send one the server must refuse."""
    msg = p4runtime_pb2.StreamMessageRequest()
    msg.packet.payload = bytes.fromhex(payload)
    for metadata_id, value in metadata:
        m = msg.packet.metadata.add()
        m.metadata_id, m.value = metadata_id, value.to_bytes(2, "big")
    sh.client.stream_out_q.put(msg)


def digest_entry(request):
    entry = sh.DigestEntry(request["digest"])
    entry.max_timeout_ns = request["max_timeout_ns"]
    entry.max_list_size = request["max_list_size"]
    entry.ack_timeout_ns = request["ack_timeout_ns"]
    entry.insert()


def stream_error(timeout):
    """The next StreamError: its code, and which message it names with what it carried (the shell
    queues a stream message it has no queue for as "unknown")."""
    msg = sh.client.get_stream_packet("unknown", timeout=timeout)
    if msg is None or not msg.HasField("error"):
        return None
    error = msg.error
    about = error.WhichOneof("details")
    carried = {}
    if about == "packet_out":
        carried = {"payload": error.packet_out.packet_out.payload.hex(),
                   "metadata": [m.metadata_id for m in error.packet_out.packet_out.metadata]}
    elif about == "digest_list_ack":
        carried = {"digest_id": error.digest_list_ack.digest_list_ack.digest_id,
                   "list_id": error.digest_list_ack.digest_list_ack.list_id}
    return {"code": code_name(error.canonical_code), "about": about, "carried": carried, "message": error.message}


def digest_list(timeout):
    msg = sh.client.get_stream_packet("digest", timeout=timeout)
    if msg is None:
        return None
    number = lambda b: int.from_bytes(b, "big")
    return {"digest": sh.context.get_name_from_id(msg.digest.digest_id), "list_id": msg.digest.list_id,
            "data": [[number(m.bitstring) for m in d.struct.members] for d in msg.digest.data]}


def digest_ack(name, list_id):
    ack = p4runtime_pb2.StreamMessageRequest()
    # A number is sent as the id as it is: one the program lacks, to be refused.
    ack.digest_ack.digest_id = name if isinstance(name, int) else sh.context.get_obj_id(sh.P4Type.digest, name)
    ack.digest_ack.list_id = list_id
    sh.client.stream_out_q.put(ack)


def group(kind, group_id, replicas):
    entry = sh.MulticastGroupEntry(group_id)
    for port, instance in replicas:
        entry.add(port, instance)
    getattr(entry, kind)()


def groups(group_id):
    return [[g.group_id, [[r.egress_port, r.instance] for r in g.replicas]]
            for g in sh.MulticastGroupEntry(group_id).read()]


def session(request):
    entry = sh.CloneSessionEntry(request["id"])
    for port, instance in request.get("replicas", []):
        entry.add(port, instance)
    entry.cos = request.get("cos", 0)
    entry.packet_length_bytes = request.get("packet_length_bytes", 0)
    getattr(entry, request["kind"])()


def sessions(session_id):
    return [[s.session_id, [[r.egress_port, r.instance] for r in s.replicas], s.cos, s.packet_length_bytes]
            for s in sh.CloneSessionEntry(session_id).read()]


def member(request):
    entry = sh.ActionProfileMember(request["profile"])(member_id=request["id"], action=request.get("action", ""))
    for param, value in request.get("params", {}).items():
        entry.action[param] = value
    getattr(entry, request["kind"])()


def members(profile):
    out = []
    for m in sh.ActionProfileMember(profile).read():
        msg = m.msg()
        action = sh.context.get_name_from_id(msg.action.action_id)
        params = {sh.context.get_param_name(action, p.param_id): int.from_bytes(p.value, "big")
                  for p in msg.action.params}
        out.append([msg.member_id, action, params])
    return out


def profile_group(request):
    entry = sh.ActionProfileGroup(request["profile"])(group_id=request["id"])
    for member_id, weight in request.get("members", []):
        entry.add(member_id, weight=weight)
    getattr(entry, request["kind"])()


def profile_groups(profile):
    return [[g.msg().group_id, [[m.member_id, m.weight] for m in g.msg().members]]
            for g in sh.ActionProfileGroup(profile).read()]


def indirect(request):
    entry = sh.TableEntry(request["table"])
    for field, value in request.get("match", {}).items():
        entry.match[field] = value
    if "member" in request:
        entry.member_id = request["member"]
    else:
        entry.group_id = request["group"]
    getattr(entry, request["kind"])()


def answer(request):
    op = request["op"]
    if op == "primary":
        return sh.client.primary
    if op in ("insert", "modify", "delete"):
        return write(op, request["entries"], request.get("atomicity", "CONTINUE_ON_ERROR"))
    if op == "set_default":
        return table_entry(request, default=True).modify()
    if op == "entries":
        return entries(request["table"])
    if op == "counter":
        return counter(request["name"], request["index"])
    if op == "device_config":
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=sh.client.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.DEVICE_CONFIG_AND_COOKIE)
        return sh.client.stub.GetForwardingPipelineConfig(request).config.p4_device_config.decode()
    if op == "pipeline":
        return pipeline(request["action"], request.get("source", ""))
    if op == "packet_in":
        return packet_in(request["timeout"])
    if op == "packet_out":
        return packet_out(request["payload"], request.get("metadata", {}))
    if op == "packet_out_raw":
        return packet_out_raw(request["payload"], request["metadata"])
    if op == "digest_entry":
        return digest_entry(request)
    if op == "stream_error":
        return stream_error(request.get("timeout", 1))
    if op == "digest_list":
        return digest_list(request["timeout"])
    if op == "digest_ack":
        return digest_ack(request["digest"], request["list_id"])
    if op == "group":
        return group(request["kind"], request["id"], request.get("replicas", []))
    if op == "groups":
        return groups(request.get("id", 0))
    if op == "session":
        return session(request)
    if op == "sessions":
        return sessions(request.get("id", 0))
    if op == "member":
        return member(request)
    if op == "members":
        return members(request["profile"])
    if op == "profile_group":
        return profile_group(request)
    if op == "profile_groups":
        return profile_groups(request["profile"])
    if op == "indirect":
        return indirect(request)
    raise ValueError(f"no request {op!r}")


def main():
    address, device_id, election_id = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    role = sys.argv[4] if len(sys.argv) > 4 else None
    primary = []
    # The shell says whether it is primary only by printing; the arbitration answer is kept.
    handshake = sh.P4RuntimeClient.handshake

    def keep_answer(client):
        get = client.get_stream_packet

        def watched(type_, timeout=1):
            msg = get(type_, timeout)
            if type_ == "arbitration" and msg is not None:
                primary.append(msg.arbitration.status.code == code_pb2.OK)
            return msg
        client.get_stream_packet = watched
        handshake(client)
    sh.P4RuntimeClient.handshake = keep_answer
    sh.setup(device_id=device_id, grpc_addr=address, election_id=(election_id >> 64, election_id % 2**64),
             role_name=role, verbose=False)
    sh.client.primary = bool(primary and primary[0])
    print(json.dumps({"ok": "connected"}), file=ANSWERS, flush=True)
    try:
        for line in sys.stdin:
            try:
                reply = {"ok": answer(json.loads(line))}
            except P4RuntimeWriteException as e:
                reply = {"error": "UNKNOWN", "errors": [[i, code_name(err.canonical_code)] for i, err in e.errors],
                         "message": str(e)}
            except grpc.RpcError as e:
                reply = {"error": e.code().name, "errors": list(enumerate(write_errors(e))), "message": e.details()}
            except P4RuntimeException as e:
                reply = {"error": e.grpc_error.code().name, "errors": [], "message": e.grpc_error.details()}
            print(json.dumps(reply), file=ANSWERS, flush=True)
    finally:
        sh.teardown()


if __name__ == "__main__":
    main()
