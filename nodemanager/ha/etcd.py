"""A small etcd v3 client over its JSON gateway (``/v3/...``) and ``requests``.

Why not the ``etcd3`` package: its last release (0.12.0, 2020) is unmaintained, pulls in grpcio
and pins an old protobuf; the gateway ships with every etcd v3 server and needs nothing new here.

    client = EtcdClient(("http://10.0.0.5:2379",), timeout=2.0)   # tries endpoints in turn
    lease = client.grant(15)                     # lease id
    ok, revision = client.create(key, value, lease)   # only if the key does not exist
    kv = client.get(key)                         # KeyValue or None
    ok, revision = client.put_if(key, value, kv.mod_revision)   # compare-and-set
    ttl = client.keepalive(lease)                # seconds left; 0: the lease is gone

Every failure (connection, timeout, HTTP error, an error in the body) raises :class:`EtcdError`
naming the endpoint and the call.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import requests

__all__ = ["EtcdClient", "EtcdError", "KeyValue"]


EMPTY: Mapping[str, str] = MappingProxyType({})


class EtcdError(Exception):
    """etcd could not be reached or refused a call."""


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: str
    create_revision: int
    mod_revision: int
    lease: int


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(text: str) -> str:
    return base64.b64decode(text).decode()


def _kv(kv: Mapping[str, Any]) -> KeyValue:
    return KeyValue(key=_unb64(kv.get("key", "")), value=_unb64(kv.get("value", "")),
                    create_revision=int(kv.get("create_revision", 0)),
                    mod_revision=int(kv.get("mod_revision", 0)), lease=int(kv.get("lease", 0)))


class EtcdClient:
    """etcd v3 over its JSON gateway; ``endpoints`` are tried in turn until one answers.

    TLS: ``ca_file`` verifies the server, ``cert_file``/``key_file`` is the client certificate.
    Authentication: ``user``/``password`` get a token (``/v3/auth/authenticate``), renewed when
    etcd says it is invalid."""

    def __init__(self, endpoints: Sequence[str], *, timeout: float = 2.0, ca_file: str = "",
                 cert_file: str = "", key_file: str = "", user: str = "", password: str = "") -> None:
        if not endpoints:
            raise ValueError("etcd: no endpoints")
        self.endpoints = tuple(e.rstrip("/") for e in endpoints)
        self.timeout = timeout
        self.user, self._password = user, password
        self._session = requests.Session()
        if ca_file:
            self._session.verify = ca_file
        if cert_file:
            self._session.cert = (cert_file, key_file) if key_file else cert_file
        self._token: str | None = None
        self._current = 0

    def close(self) -> None:
        self._session.close()

    # -- transport ------------------------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any], *, auth: bool = True) -> dict[str, Any]:
        errors = []
        for i in range(len(self.endpoints)):
            index = (self._current + i) % len(self.endpoints)
            endpoint = self.endpoints[index]
            try:
                data = self._post_one(endpoint, path, body, auth)
            except (requests.RequestException, ValueError) as exc:
                errors.append(f"{endpoint}: {exc}")
                continue
            self._current = index
            return data
        raise EtcdError(f"etcd {path}: " + "; ".join(errors))

    def _post_one(self, endpoint: str, path: str, body: dict[str, Any], auth: bool) -> dict[str, Any]:
        headers = {}
        if auth and self.user:
            if self._token is None:
                self._token = self._authenticate(endpoint)
            headers["Authorization"] = self._token
        resp = self._session.post(endpoint + path, json=body, headers=headers, timeout=self.timeout)
        data = resp.json() if resp.content else {}
        if "result" in data and isinstance(data["result"], dict):
            data = data["result"]  # streaming calls (keepalive) wrap their one answer
        error = data.get("error") or (data.get("message") if resp.status_code >= 400 else None)
        if error:
            if auth and self.user and "token" in str(error).lower():
                self._token = None  # expired or invalid: authenticate again on the next call
            raise EtcdError(f"etcd {endpoint}{path}: HTTP {resp.status_code}: {error}")
        if resp.status_code >= 400:
            raise EtcdError(f"etcd {endpoint}{path}: HTTP {resp.status_code}")
        return data

    def _authenticate(self, endpoint: str) -> str:
        resp = self._session.post(endpoint + "/v3/auth/authenticate",
                                  json={"name": self.user, "password": self._password}, timeout=self.timeout)
        data = resp.json() if resp.content else {}
        if resp.status_code >= 400 or "token" not in data:
            raise EtcdError(f"etcd {endpoint}: authentication of user {self.user!r} failed: "
                            f"{data.get('error') or data.get('message') or resp.status_code}")
        return str(data["token"])

    # -- calls ----------------------------------------------------------------------------------

    def grant(self, ttl: float) -> int:
        """A new lease of ``ttl`` seconds (rounded up); its id."""
        data = self._post("/v3/lease/grant", {"TTL": str(max(1, int(-(-ttl // 1))))})
        return int(data["ID"])

    def keepalive(self, lease: int) -> float:
        """Renew ``lease``; the seconds it has left (0: it expired or was revoked)."""
        data = self._post("/v3/lease/keepalive", {"ID": str(lease)})
        return float(data.get("TTL", 0))

    def revoke(self, lease: int) -> None:
        """End ``lease`` and delete its keys; a lease already gone is no error."""
        try:
            self._post("/v3/lease/revoke", {"ID": str(lease)})
        except EtcdError as exc:
            if "lease not found" not in str(exc):
                raise

    def create(self, key: str, value: str, lease: int,
               also: Mapping[str, str] = EMPTY) -> tuple[bool, int]:
        """Put ``key`` with ``lease`` only if it does not exist (create_revision == 0), and in the
        same transaction the keys ``also`` (no lease): whether it was created, and the revision of
        the transaction (the key's create revision if so)."""
        puts = [{"request_put": {"key": _b64(key), "value": _b64(value), "lease": str(lease)}}]
        puts += [{"request_put": {"key": _b64(k), "value": _b64(v)}} for k, v in also.items()]
        body = {"compare": [{"key": _b64(key), "target": "CREATE", "result": "EQUAL",
                             "create_revision": "0"}],
                "success": puts}
        data = self._post("/v3/kv/txn", body)
        return bool(data.get("succeeded", False)), int(data["header"]["revision"])

    def get(self, key: str) -> KeyValue | None:
        """The key's value and revisions, or None if it does not exist."""
        data = self._post("/v3/kv/range", {"key": _b64(key)})
        kvs = data.get("kvs") or []
        if not kvs:
            return None
        return _kv(kvs[0])

    def put(self, key: str, value: str, lease: int = 0) -> int:
        """Set ``key`` (with ``lease``, if not 0); the new revision."""
        body = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        data = self._post("/v3/kv/put", body)
        return int(data["header"]["revision"])

    def get_prefix(self, prefix: str) -> list[KeyValue]:
        """Every key starting with ``prefix``, in key order."""
        raw = prefix.encode()
        end = raw[:-1] + bytes([raw[-1] + 1])            # the prefix's range end (its last byte + 1)
        data = self._post("/v3/kv/range", {"key": _b64(prefix), "range_end": base64.b64encode(end).decode()})
        return [_kv(kv) for kv in data.get("kvs") or []]

    def put_if(self, key: str, value: str, mod_revision: int) -> tuple[bool, int]:
        """Set ``key`` only if its last change was at ``mod_revision`` (0: only if it does not
        exist): whether it was set, and the revision after the transaction (the key's new
        mod_revision if so). A request etcd applies late, after another write, changes nothing."""
        body = {"compare": [{"key": _b64(key), "target": "MOD", "result": "EQUAL",
                             "mod_revision": str(mod_revision)}],
                "success": [{"request_put": {"key": _b64(key), "value": _b64(value)}}]}
        data = self._post("/v3/kv/txn", body)
        return bool(data.get("succeeded", False)), int(data["header"]["revision"])

    def delete(self, key: str) -> None:
        self._post("/v3/kv/deleterange", {"key": _b64(key)})
