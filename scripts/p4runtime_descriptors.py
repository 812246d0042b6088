r"""Writes P4Runtime's schema as a protobuf FileDescriptorSet: crates/p4runtime/schema/p4runtime.fds,
which the crate's build generates its Rust code from. Run it only to move to another P4Runtime
release; the build itself needs no Python.

The `p4runtime` package on PyPI carries every .proto file compiled into its Python modules, and
each module's descriptor serialises back to the FileDescriptorProto it came from. The set holds
p4runtime.proto and everything it imports, dependencies first, as protoc's `--include_imports`
would write it. The release and the packages it imports are pinned, with their hashes, in
scripts/p4runtime-requirements.txt; to move to another, change the pins there, then:

    pip install --no-deps --require-hashes --only-binary :all: --target /tmp/p4rt \
        -r scripts/p4runtime-requirements.txt
    PYTHONPATH=/tmp/p4rt python3 -S scripts/p4runtime_descriptors.py crates/p4runtime/schema/p4runtime.fds

(`-S`: those packages only, not a newer protobuf from site-packages.) tests/test_p4runtime_schema.py
does the same from the pins that scripts/setup.sh installs and fails unless the committed set is
what comes out.
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
