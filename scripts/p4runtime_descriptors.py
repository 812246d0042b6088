"""Writes P4Runtime's schema as a protobuf FileDescriptorSet: crates/p4runtime/schema/p4runtime.fds,
which the crate's build generates its Rust code from. Run it only to move to another P4Runtime
release; the build itself needs no Python.

The `p4runtime` package on PyPI carries every .proto file compiled into its Python modules, and
each module's descriptor serialises back to the FileDescriptorProto it came from. The set holds
p4runtime.proto and everything it imports, dependencies first, as protoc's `--include_imports`
would write it. The package predates protobuf 4's generated code, and only its messages are
imported, so neither grpcio nor its other dependencies are needed:

    python3 -m venv /tmp/p4rt && /tmp/p4rt/bin/pip install --no-deps p4runtime==1.6.0 \
        protobuf==3.20.3 googleapis-common-protos==1.56.4
    /tmp/p4rt/bin/python scripts/p4runtime_descriptors.py crates/p4runtime/schema/p4runtime.fds
"""

import sys

from google.protobuf import descriptor_pb2
from p4.v1 import p4runtime_pb2


def main(out_path):
    ordered, seen = [], set()

    def visit(file_descriptor):
        if file_descriptor.name in seen:
            return
        seen.add(file_descriptor.name)
        for dependency in file_descriptor.dependencies:
            visit(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file_descriptor.CopyToProto(proto)
        ordered.append(proto)

    visit(p4runtime_pb2.DESCRIPTOR)
    fds = descriptor_pb2.FileDescriptorSet(file=ordered)
    with open(out_path, "wb") as out:
        out.write(fds.SerializeToString())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
