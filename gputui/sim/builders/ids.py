"""Time stamps, stable ids and names, and image references as the real components write them."""
from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone


def rfc3339(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def ago(seconds: float, now: datetime | None = None) -> str:
    return rfc3339((now or utcnow()) - timedelta(seconds=seconds))


def digest(*parts: object, length: int = 64) -> str:
    """A stable hex string derived from the parts (ids, hashes, uids)."""
    h = hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()
    while len(h) < length:
        h += hashlib.sha256(h.encode()).hexdigest()
    return h[:length]


def stable_uid(*parts: object) -> str:
    h = digest("uid", *parts, length=32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gpu_uuid(node: str, index: int) -> str:
    h = digest("gpu", node, index, length=32)
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def mig_uuid(node: str, gpu_index: int, gi: int) -> str:
    h = digest("mig", node, gpu_index, gi, length=32)
    return f"MIG-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def suffix(*parts: object, length: int = 5) -> str:
    """A pod-name style random-looking suffix (consonants and digits), stable for the parts."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    n = int(digest("suffix", *parts, length=16), 16)
    out = []
    for _ in range(length):
        n, r = divmod(n, len(alphabet))
        out.append(alphabet[r])
    return "".join(out)


def full_image(image: str) -> str:
    """The image reference as containerd reports it (docker.io/library/ added where implied)."""
    name = image.split("@")[0]
    first = name.split("/")[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif "." not in first and ":" not in first and first != "localhost":
        name = "docker.io/" + name
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name


def image_id(image: str) -> str:
    repo = full_image(image).rsplit(":", 1)[0]
    return f"{repo}@sha256:{digest('image', full_image(image))}"
