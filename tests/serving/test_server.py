"""The real model server on 127.0.0.1: real photos through V1 and v2, every bad request a
4xx, still answering afterwards, one log line a request, no process left behind."""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from components.evaluation.predictions import predict_files
from tests.support.helpers import png_of_zeros
from tests.support.models import seeded_model
from tests.support.processes import HANG_SECONDS
from tests.support.servers import ModelServerProcess, has_mapped, process_group_members

pytestmark = pytest.mark.integration
V1 = "/v1/models/dogs-vs-cats:predict"
V2 = "/v2/models/dogs-vs-cats/infer"
JSON = {"Content-Type": "application/json"}
LIMITS = ("--max-body-mb", "1", "--max-instances", "8")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return seeded_model(tmp_path_factory.mktemp("serve") / "model")


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    with ModelServerProcess(model_dir, tmp_path_factory.mktemp("serve-log"), *LIMITS) as running:
        yield running
    assert process_group_members(running.process.pid) == []


def test_a_train_outputs_server_scores_without_torch(server):
    """Its graph checked against the recorded spec.json: torch never loads."""
    assert not has_mapped(server.process.pid, "libtorch_cpu")


@pytest.fixture(scope="module")
def photos(sample_images) -> list:
    cats = sorted((sample_images / "PetImages/Cat").glob("*.jpg"))[:4]
    return [*cats, *sorted((sample_images / "PetImages/Dog").glob("*.jpg"))[:4]]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def v1_body(*photos: bytes) -> dict:
    return {"instances": [{"image": {"b64": b64(p)}} for p in photos]}


def good_answer(server, photo: bytes) -> dict:
    answer = requests.post(server.url + V1, json=v1_body(photo), timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["predictions"][0]


def test_real_photos_get_predicts_answers_through_v1_and_v2(server, model_dir, photos):
    expected = [(c, p) for _, c, p in predict_files(str(model_dir), photos).classified]
    data = [p.read_bytes() for p in photos]
    v1 = requests.post(server.url + V1, json=v1_body(*data), timeout=60).json()["predictions"]
    v2_request = {
        "inputs": [
            {
                "name": "image",
                "shape": [len(data)],
                "datatype": "BYTES",
                "data": [b64(d) for d in data],
            }
        ]
    }
    v2 = requests.post(server.url + V2, json=v2_request, timeout=60).json()["outputs"]
    v2_by_name = {o["name"]: o for o in v2}
    assert (
        v2_by_name["class"]["datatype"] == "BYTES"
        and v2_by_name["probability"]["datatype"] == "FP32"
    )
    got_v2 = list(zip(v2_by_name["class"]["data"], v2_by_name["probability"]["data"], strict=True))
    for got in ([(a["class"], a["probability"]) for a in v1], got_v2):
        assert [c for c, _ in got] == [c for c, _ in expected]
        assert all(abs(p - q) < 1e-3 for (_, p), (_, q) in zip(got, expected, strict=True))
    # curl -d sends no JSON content type: the V1 body is read all the same
    plain = requests.post(server.url + V1, data=json_text(v1_body(data[0])), timeout=30)
    assert plain.json()["predictions"][0]["class"] == expected[0][0]


def json_text(body: dict) -> str:
    import json

    return json.dumps(body)


def test_health_metadata_and_metrics_are_kserves(server, photos):
    good_answer(server, photos[0].read_bytes())  # a prediction to count, whatever ran before
    assert requests.get(server.url + "/v2/health/ready", timeout=10).status_code == 200
    metadata = requests.get(server.url + "/v2/models/dogs-vs-cats", timeout=10).json()
    assert metadata["inputs"] == [{"name": "image", "datatype": "BYTES", "shape": [-1]}]
    metrics = requests.get(server.url + "/metrics", timeout=10).text
    assert 'request_predict_seconds_count{model_name="dogs-vs-cats"}' in metrics


def test_no_client_can_load_or_unload_the_model_and_liveness_says_it_serves(server, photos):
    for action in ("unload", "load"):
        answer = requests.post(
            f"{server.url}/v2/repository/models/dogs-vs-cats/{action}", timeout=10
        )
        assert answer.status_code == 404, action  # KServe's repository routes are not served
    assert requests.get(server.url + "/", timeout=10).json() == {"status": "alive"}
    assert good_answer(server, photos[0].read_bytes())["class"] in ("cat", "dog")


def test_answers_name_what_was_expected_without_echoing_the_client(server, photos):
    huge_key = "k" * (512 * 1024)  # half a MiB in one key, under the 1 MiB body limit
    answer = requests.post(server.url + V1, json={huge_key: 1, "b": 2}, timeout=30)
    assert answer.status_code == 400 and len(answer.content) < 1024
    assert "found an object with keys ['" + "k" * 40 + "…', 'b']" in answer.json()["error"]
    long_name = {"inputs": [{"name": "n" * 100_000, "shape": [1], "datatype": "BYTES", "data": []}]}
    answer = requests.post(server.url + V2, json=long_name, headers=JSON, timeout=30)
    assert answer.status_code == 400 and len(answer.content) < 1024
    assert good_answer(server, photos[0].read_bytes())["class"] in ("cat", "dog")


def test_a_request_of_more_decoding_than_one_may_take_is_refused_before_decoding(server):
    blank = png_of_zeros(7000, 7000)  # 49 million pixels in 48 KB, a 0.15 s decode each
    answer = requests.post(server.url + V1, json=v1_body(*[blank] * 8), timeout=60)
    assert answer.status_code == 400  # counted from the headers, before any decode
    assert "at most 200 million pixels together, found 392 million" in answer.json()["error"]


def test_v2_takes_the_shape_its_metadata_declares_and_refuses_binary_data_in_a_4xx(server, photos):
    data = [b64(p.read_bytes()) for p in photos[:2]]
    any_count = {"inputs": [{"name": "image", "shape": [-1], "datatype": "BYTES", "data": data}]}
    answer = requests.post(server.url + V2, json=any_count, headers=JSON, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"][0]["shape"] == [2]
    photo = photos[0].read_bytes()
    element = len(photo).to_bytes(4, "little") + photo
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "image",
                    "shape": [1],
                    "datatype": "BYTES",
                    "parameters": {"binary_data_size": len(element)},
                }
            ]
        }
    ).encode()
    answer = requests.post(
        server.url + V2,
        data=header + element,
        headers={"Inference-Header-Content-Length": str(len(header))},
        timeout=60,
    )
    assert answer.status_code == 415
    assert "binary data extension is not served" in answer.json()["error"]


def test_liveness_fails_once_the_model_does_not_serve(model_dir):
    """The liveness route itself, on a model that is not (or no longer) loaded."""
    from kserve import ModelServer

    from components.serving.config import ServeConfig
    from components.serving.model import DogsVsCats
    from components.serving.server import serving

    model = DogsVsCats(ServeConfig(model=str(model_dir)))
    model_server = ModelServer(enable_grpc=False, workers=1)
    model_server.register_model(model)
    model.ready = False
    assert not serving(model_server)
    model.ready = True
    assert serving(model_server)


def read_reply(sock: socket.socket) -> str:
    """Everything the server sends until it closes the connection (as it does after 413)."""
    reply = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            reply += chunk
    return reply.decode(errors="replace")


def streamed(server, path: str, total: int, chunk: int = 1024**2) -> tuple[str, int]:
    """POST ``total`` bytes chunked, without holding them; the reply and bytes sent.

    The reply may be lost: a server that closes a connection with bytes unread resets it
    (test_limits.py shows the 413 itself)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        block = f"{chunk:x}\r\n".encode() + b" " * chunk + b"\r\n"
        try:
            while sent < total:
                sock.sendall(block)
                sent += chunk
        except OSError:  # the server answered and closed: the rest is not read
            pass
        with contextlib.suppress(OSError):
            return read_reply(sock), sent
    return "", sent


def declared(server, path: str, length: int) -> tuple[int, int]:
    """Announce a body of ``length`` bytes, send none; the status and bytes sent."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n".encode()
        )
        reply = read_reply(sock)
    assert "at most 1048576 bytes" in reply
    return int(reply.split()[1]), 0


def test_bad_requests_are_4xx_with_kserves_error_body_and_the_server_keeps_answering(
    server, photos
):
    photo = photos[0].read_bytes()
    before = good_answer(server, photo)
    rss_before = server.rss_bytes()
    v2_fp32 = {"inputs": [{"name": "image", "shape": [1], "datatype": "FP32", "data": [1.0]}]}
    cases = {
        "not an image": (V1, v1_body(b"just some text"), 400, "not an image in a photo format"),
        "truncated": (V1, v1_body(photo[:1500]), 400, "truncated or corrupt image data"),
        "pixel bomb": (V1, v1_body(png_of_zeros(8000, 8000)), 400, "50,000,000-pixel limit"),
        "memory bomb": (
            V1,
            v1_body(*[png_of_zeros(7000, 7000, bit_depth=16)] * 2),  # 16 bits, 95 KB each
            400,
            "MiB to decode, over the 256 MiB limit",
        ),
        "too many": (
            V1,
            v1_body(*[photo] * 9),
            400,
            "expected 1 to 8 photos in one request, found 9",
        ),
        "wrong json": (V1, '{"instances": [', 400, ""),
        "wrong shape": (V1, {"instances": {"image": 1}}, 400, '"instances" to be a list'),
        "v2 datatype": (V2, v2_fp32, 400, "expected input 'image' of datatype BYTES"),
    }
    for name, (path, body, status, message) in cases.items():
        sent = dict(data=body) if isinstance(body, str) else dict(json=body)
        answer = requests.post(server.url + path, headers=JSON, timeout=60, **sent)
        assert answer.status_code == status, (name, answer.text)
        assert message in answer.json()["error"], (name, answer.text)
    # 200 MB: declared, then streamed; neither is read whole
    status, sent = declared(server, V1, 200 * 1024**2)
    assert status == 413 and sent == 0
    reply, sent = streamed(server, V1, 200 * 1024**2)
    assert sent < 200 * 1024**2 and reply.split()[1:2] in ([], ["413"])  # stopped early
    assert good_answer(server, photo) == before  # still serving, the same answer
    assert server.rss_bytes() - rss_before < 150 * 1024**2


def test_concurrent_clients_each_get_their_own_answer(server, photos):
    data = [p.read_bytes() for p in photos]
    singly = [good_answer(server, d) for d in data]
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(lambda d: good_answer(server, d), data * 4))
    # batched with others, the same class and, to float rounding, the same probability
    for got, alone in zip(together, singly * 4, strict=True):
        assert got["class"] == alone["class"]
        assert got["probability"] == pytest.approx(alone["probability"], abs=1e-5)


def test_one_log_line_a_request(server, photos):
    lines_before = server.log_path.read_text().count("\n")
    for _ in range(5):
        good_answer(server, photos[0].read_bytes())
    added = server.log_path.read_text().splitlines()[lines_before:]
    assert len(added) == 5 and all("POST /v1/models/dogs-vs-cats" in line for line in added), added


@pytest.mark.slow
@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["terminal", "background job"])
def test_ctrl_c_stops_the_server_cleanly_with_status_130(model_dir, tmp_path, sigint_ignored):
    with ModelServerProcess(model_dir, tmp_path, sigint_ignored=sigint_ignored) as running:
        running.process.send_signal(signal.SIGINT)
        assert running.process.wait(timeout=30) == 130
        assert process_group_members(running.process.pid) == []
    assert "Traceback" not in running.log_tail()


def test_a_model_that_is_not_there_is_one_line(tmp_path):
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "components.serve", "--model", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("error: expected a train output folder")


@pytest.mark.slow
def test_connections_beyond_the_limit_are_503_at_once_and_served_again_after(
    model_dir, photos, tmp_path
):
    """One slot: a complete request of 32 photos, held a second in the batcher (its
    longest wait for others), holds it; a request meanwhile is 503 at once, and once the
    first is answered the slot is given back."""
    flags = ("--max-connections", "1", "--batch-wait-ms", "1000")
    with ModelServerProcess(model_dir, tmp_path, *flags) as running:
        ready = f"{running.url}/v1/models/dogs-vs-cats"
        body = json.dumps(v1_body(*[photos[0].read_bytes()] * 32)).encode()
        with socket.create_connection(("127.0.0.1", running.port), timeout=30) as held:
            held.sendall(
                f"POST {V1} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            time.sleep(0.5)
            assert requests.get(ready, timeout=10).status_code == 503
            assert read_reply(held).startswith("HTTP/1.1 200")
        deadline = time.monotonic() + 30
        while requests.get(ready, timeout=10).status_code != 200:
            assert time.monotonic() < deadline, "the place was not given back"
            time.sleep(0.2)


def test_decoder_bombs_are_refused_from_their_markers_and_others_are_answered(server, photos):
    """JPEGs that would make libjpeg allocate a gigabyte or decode for a minute, sent at
    once by two clients each, beside a client with a real photo: each bomb a 400 that
    says why, the photo answered, the server's memory far inside its pod's 2 GiB."""
    from tests.data.test_jpeg import jpeg, with_frame, with_last_scan_repeated

    bombs = {
        "coefficient buffer": with_frame(jpeg(True, "RGB", (16, 16)), 17800, 10000),
        "arithmetic coding": with_frame(jpeg(False), 17800, 10000, marker=0xC9),
        "scans": with_frame(with_last_scan_repeated(jpeg(True, "L", (16, 16)), 2000), 9000, 9000),
    }
    said = {
        "coefficient buffer": "MiB to decode, over the 256 MiB limit",
        "arithmetic coding": "arithmetic-coded JPEG",
        "scans": "more decoding work than a photo takes",
    }

    def send(name: str) -> tuple[str, int, str]:
        answer = requests.post(server.url + V1, json=v1_body(bombs[name]), timeout=60)
        return name, answer.status_code, answer.text

    with ThreadPoolExecutor(7) as pool:
        refused = list(pool.map(send, [*bombs, *bombs]))
        good = pool.submit(good_answer, server, photos[0].read_bytes())
        assert good.result()["class"] in ("cat", "dog")
    for name, status, text in refused:
        assert status == 400 and said[name] in text, (name, status, text)
    assert server.rss_bytes("VmHWM") < 2 * 1024**3  # its peak, inside the pod's 2 GiB limit
