#!/usr/bin/python3
"""Reads TensorBoard event files as TensorBoard would, checking every record:

    /usr/bin/python3 tests/tensorboard_check.py DIR proto/tensorboard.proto

Each file in DIR named events.out.tfevents.* must be a sequence of records
framed as TFRecord (uint64 length, masked CRC-32C of it, payload, masked
CRC-32C of the payload), each payload an Event (decoded with Python's
protobuf from the .proto, compiled here with protoc). Prints JSON: the
files, the first event's file_version, every scalar tag and its values by
step. Exits 1, saying why, on a bad frame or CRC.
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def main():
    directory, proto = sys.argv[1], sys.argv[2]
    out_dir = tempfile.mkdtemp()
    subprocess.run(["protoc", f"--proto_path={os.path.dirname(os.path.abspath(proto))}",
                    f"--python_out={out_dir}", os.path.basename(proto)], check=True)
    sys.path.insert(0, out_dir)
    import tensorboard_pb2  # noqa: E402

    files = sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*")))
    if not files:
        sys.exit(f"no events.out.tfevents.* in {directory}")
    result = {"files": files, "file_version": None, "scalars": {}}
    for path in files:
        data = open(path, "rb").read()
        at = 0
        first = True
        while at < len(data):
            if len(data) - at < 16:
                sys.exit(f"{path}: a truncated record at byte {at}")
            header = data[at:at + 8]
            (length,) = struct.unpack("<Q", header)
            (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
            if length_crc != masked(header):
                sys.exit(f"{path}: the length's CRC at byte {at} is wrong")
            payload = data[at + 12:at + 12 + length]
            (payload_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
            if payload_crc != masked(payload):
                sys.exit(f"{path}: the payload's CRC at byte {at} is wrong")
            event = tensorboard_pb2.Event()
            event.ParseFromString(payload)
            if first:
                result["file_version"] = event.file_version
                first = False
            for v in event.summary.value:
                result["scalars"].setdefault(v.tag, {})[str(event.step)] = v.simple_value
            at += 16 + length
    print(json.dumps(result))


if __name__ == "__main__":
    main()
