"""Stand-ins for the stack's third-party images (Caddy, PostgreSQL, Redis), built here.

deploy/compose.yaml names the official images, which no registry reachable from the tests or
CI can give; tests/support/standins/README.md says what the stand-ins keep of their interface.
Each is built from Debian's packages on the tests' own base (image_build.BASE), on the host's
network (see image_build.HOST_NETWORK), once: its tag is a hash of its definition, so a later
run reuses it and a changed definition makes a new one.
"""

import hashlib
from pathlib import Path

from tests.support.image_build import BASE, HOST_NETWORK, LIMITS, base_ensure, podman

STANDINS = Path(__file__).resolve().parent / "standins"
# compose.yaml's variable for each image.
VARIABLES = {
    "caddy": "ROJO_CADDY_IMAGE",
    "postgres": "ROJO_POSTGRES_IMAGE",
    "redis": "ROJO_REDIS_IMAGE",
}


def definition_hash(directory: Path) -> str:
    digest = hashlib.sha256(BASE.encode())
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def standin_images() -> dict[str, str]:
    """compose.yaml's image variables, each naming a stand-in built (if missing) here."""
    base_ensure()
    images = {}
    for name, variable in VARIABLES.items():
        directory = STANDINS / name
        tag = f"localhost/rojo-test-{name}:{definition_hash(directory)}"
        if podman("image", "exists", tag, check=False).returncode != 0:
            podman(
                "build", *LIMITS, *HOST_NETWORK, "--format", "docker",
                "--build-arg", f"BASE={BASE}", "-t", tag, str(directory),
            )  # fmt: skip
        images[variable] = tag
    return images
