"""Ed25519 keys, signatures and their text forms.

Keys and signatures travel as unpadded base64url text. A private key is stored on disk as a PEM
(PKCS#8) file, the format ``openssl`` and every KMS export understand.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ._errors import SignatureError


def b64u_encode(data: bytes) -> str:
    """Unpadded base64url text of ``data``."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64u_decode(text: str) -> bytes:
    """Bytes of unpadded (or padded) base64url ``text``.

    Raises:
        SignatureError: the text is not base64url.
    """
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"not base64url: {text[:16]!r}") from exc


class SigningKey:
    """An Ed25519 private key with its public half.

    Create one with :meth:`generate`, :meth:`from_file` or :meth:`from_private_bytes`. Never pass
    one into workflow code: signing happens in activities and services.
    """

    __slots__ = ("_private", "public_key")

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        raw = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        #: The public key as unpadded base64url of its 32 raw bytes.
        self.public_key: str = b64u_encode(raw)

    @classmethod
    def generate(cls) -> SigningKey:
        """A fresh random key."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, raw: bytes) -> SigningKey:
        """A key from its 32 raw private bytes (a seed).

        Raises:
            SignatureError: ``raw`` is not 32 bytes.
        """
        if len(raw) != 32:
            raise SignatureError(f"an Ed25519 seed is 32 bytes, got {len(raw)}")
        return cls(Ed25519PrivateKey.from_private_bytes(raw))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> SigningKey:
        """Load a PKCS#8 PEM Ed25519 private key.

        Raises:
            FileNotFoundError: no file at ``path``.
            SignatureError: the file is not an unencrypted Ed25519 PEM key.
        """
        data = Path(path).read_bytes()
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise SignatureError(f"{path}: not an unencrypted PEM private key") from exc
        if not isinstance(key, Ed25519PrivateKey):
            raise SignatureError(f"{path}: not an Ed25519 key")
        return cls(key)

    def to_file(self, path: str | os.PathLike[str], *, exclusive: bool = False) -> None:
        """Write the key as PKCS#8 PEM, readable by its owner only (mode 0600).

        Args:
            path: the file (parent directories are created).
            exclusive: create it or fail: never replace a file, never follow a link.

        Raises:
            FileExistsError: ``exclusive`` and something (a file, a link) is at ``path``.
        """
        pem = self._private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
        fd = os.open(p, flags, 0o600)
        os.fchmod(fd, 0o600)  # O_CREAT's mode applies only to new files
        with os.fdopen(fd, "wb") as f:
            f.write(pem)

    def sign(self, data: bytes) -> str:
        """Ed25519 signature of ``data`` as unpadded base64url (86 characters)."""
        return b64u_encode(self._private.sign(data))


_PUBLIC_CACHE: dict[str, Ed25519PublicKey] = {}


def load_public_key(public_key: str) -> Ed25519PublicKey:
    """Parse a base64url public key (cached; keys are immutable values).

    Raises:
        SignatureError: not a 32-byte base64url Ed25519 public key.
    """
    key = _PUBLIC_CACHE.get(public_key)
    if key is None:
        raw = b64u_decode(public_key)
        if len(raw) != 32:
            raise SignatureError("an Ed25519 public key is 32 bytes")
        key = Ed25519PublicKey.from_public_bytes(raw)
        if len(_PUBLIC_CACHE) < 65536:
            _PUBLIC_CACHE[public_key] = key
    return key


def verify(public_key: str, signature: str, data: bytes) -> bool:
    """Whether ``signature`` (base64url) is a valid Ed25519 signature of ``data``.

    Never raises for a bad signature or a malformed key: both answer ``False``.
    """
    try:
        load_public_key(public_key).verify(b64u_decode(signature), data)
    except (InvalidSignature, SignatureError, ValueError):
        return False
    return True
