import io
import logging

import numpy as np
from moto.server import ThreadedMotoServer

from distsampling import RemoteSource, RemoteUnavailableError
from distsampling.tools.launch import free_port

# an S3 API on this machine (moto's server) stands in for the real one
port = free_port()
server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
server.start()
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # quiet: no line per request
options = {  # s3fs's arguments; for AWS itself: none, or key=/secret=/profile=
    "endpoint_url": f"http://127.0.0.1:{port}",
    "key": "testing",
    "secret": "testing",
    "client_kwargs": {"region_name": "eu-west-1"},
    "config_kwargs": {"retries": {"max_attempts": 1}},  # the retries are RemoteSource's
    "skip_instance_cache": True,
}
try:
    import s3fs

    fs = s3fs.S3FileSystem(**options)
    fs.mkdir("train")
    for j in range(2):  # two files of 100 samples [file, row]
        buf = io.BytesIO()
        np.save(buf, np.stack([np.full(100, j), np.arange(100)], 1).astype(np.float32))
        fs.pipe(f"train/part-{j}.npy", buf.getvalue())

    remote = RemoteSource("s3://train", storage_options=options, deadline=1.0)
    print(remote.files)
    print("sample 42 of file 1:", remote.read(1, 42))  # one ranged GET of 8 bytes

    fs.rm("train/part-0.npy")  # a key that vanished: named at once, never retried
    try:
        remote.read(0, 0)
    except FileNotFoundError as err:
        print(str(err).split(": ")[0])

    server.stop()  # storage down: retried with backoff until deadline=1.0 s, then named
    try:
        remote.read(1, 0)
    except RemoteUnavailableError as err:
        print(type(err).__name__, str(err).split(" for ")[0])
finally:
    server.stop()
