"""Writes P4Runtime's schema as a protobuf FileDescriptorSet, for crates/p4runtime's build.

The schema is not kept in this repository: the `p4runtime` package on PyPI (installed by
`scripts/setup.sh build` into .venv-build) carries every .proto file compiled into its Python
modules, and each module's descriptor serialises back to the FileDescriptorProto it came from.
The set holds p4runtime.proto and everything it imports, dependencies first, as protoc's
`--include_imports` would write it.

    python scripts/p4runtime_descriptors.py OUT.bin
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
