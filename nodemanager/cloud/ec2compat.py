"""libcloud's EC2 driver, adjusted for EC2-compatible endpoints (measured against moto 5.2.1).

Three adjustments; each keeps libcloud's own request path (signing, HTTP, reply parsing):

1. Namespace. libcloud 3.9 parses every EC2 reply with the fixed namespace
   ``http://ec2.amazonaws.com/doc/2016-11-15/`` (``libcloud.compute.drivers.ec2.NAMESPACE``).
   Real AWS echoes it (the API version libcloud requests); moto 5.2.x replies with
   ``http://ec2.amazonaws.com/doc/2016-11-15`` (no trailing slash), moto 5.0.x with
   ``.../2013-10-15/``, and EC2-compatible private clouds differ too. With another namespace
   libcloud finds no elements: ``list_nodes()`` returns ``[]`` and ``create_node()`` returns
   ``[]``. Error replies have the opposite problem: libcloud looks for ``Errors/Error`` without a
   namespace (as AWS sends it), moto puts its namespace on ``<Response>``, and the error message
   (with the code we classify) comes out empty.
   Fix: the driver's response class rewrites the parsed reply so the elements in the reply's
   root namespace carry libcloud's namespace (success) or none (error). A reply already in
   libcloud's namespace is left untouched.
2. Paging. libcloud's ``list_nodes`` sends one ``DescribeInstances`` and ignores ``nextToken``;
   moto pages at 100 instances (AWS may page too), so a 200-node cluster was listed as 100.
   :meth:`ex_list_nodes_page` asks for ``MaxResults=1000`` and returns the ``nextToken``; the
   adapter follows it, one rate-limited call per page. It also skips libcloud's extra
   ``DescribeAddresses`` call (elastic IPs), which the controller does not use.
3. Tag indexes. libcloud's ``ex_create_tags``/``ex_delete_tags`` number ``ResourceId.0`` and
   ``Tag.0`` from 0; the EC2 API documents 1-based lists and moto rejects 0 (``MissingParameter``).
   :meth:`ex_put_tags`/:meth:`ex_remove_tags` send 1-based lists.

Also: moto routes signature-v2 requests to its S3 backend, so the adapter defaults
``signature_version`` to ``"4"`` (which real AWS wants as well).

``tests/test_cloud_ec2.py`` measures all three against moto_server: plain libcloud's create
returns ``[]`` there, ours boots, lists (three pages of five), tags and destroys, and error codes
come through.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from libcloud.compute.drivers.ec2 import NAMESPACE
from libcloud.utils.py3 import ET
from libcloud.utils.xml import findall, findtext

__all__ = ["tolerant_ec2_driver", "normalise_namespace", "NAMESPACE"]


def _namespace_of(tag: str) -> str | None:
    return tag[1:].split("}", 1)[0] if tag.startswith("{") else None


def normalise_namespace(root: Any, target: str | None) -> Any:
    """Give every element in ``root``'s own namespace the namespace ``target`` (None: no namespace).

    Elements in other namespaces are left alone. Returns ``root`` (changed in place).
    """
    source = _namespace_of(root.tag)
    if source == target:
        return root
    prefix = f"{{{source}}}" if source is not None else ""
    new = f"{{{target}}}" if target is not None else ""
    for el in root.iter():
        tag = el.tag
        if not isinstance(tag, str):
            continue  # comments and processing instructions
        if prefix:
            if tag.startswith(prefix):
                el.tag = new + tag[len(prefix):]
        elif not tag.startswith("{"):
            el.tag = new + tag
    return root


class _TolerantResponse:
    """Mixin for libcloud's ``EC2Response``: normalise the namespace, then parse as libcloud does."""

    def parse_body(self):
        root = super().parse_body()
        if hasattr(root, "iter"):
            normalise_namespace(root, NAMESPACE)
        return root

    def parse_error(self):
        body = self.body
        try:
            root = ET.XML(body)
        except Exception:
            return super().parse_error()
        if _namespace_of(root.tag) is not None:
            self.body = ET.tostring(normalise_namespace(root, None), encoding="unicode")
        return super().parse_error()


class _EC2Extras:
    """Methods added to libcloud's EC2 driver class (``self`` is that driver)."""

    PAGE_SIZE = 1000  # the largest MaxResults EC2 accepts for DescribeInstances

    def ex_list_nodes_page(self, ex_filters: dict[str, str] | None = None,
                           next_token: str | None = None) -> tuple[list[Any], str | None]:
        """One page of ``DescribeInstances``: (nodes, the next page's token or None)."""
        params: dict[str, Any] = {"Action": "DescribeInstances", "MaxResults": str(self.PAGE_SIZE)}
        if ex_filters:
            params.update(self._build_filters(ex_filters))  # type: ignore[attr-defined]
        if next_token:
            params["NextToken"] = next_token
        elem = self.connection.request(self.path, params=params).object  # type: ignore[attr-defined]
        nodes: list[Any] = []
        for rs in findall(element=elem, xpath="reservationSet/item", namespace=NAMESPACE):
            nodes += self._to_nodes(rs, "instancesSet/item")  # type: ignore[attr-defined]
        token = findtext(element=elem, xpath="nextToken", namespace=NAMESPACE)
        return nodes, token or None

    def ex_put_tags(self, resource_id: str, tags: dict[str, str]) -> None:
        """``CreateTags`` on one resource, with 1-based indexes."""
        self._tag_call("CreateTags", resource_id, dict(tags))

    def ex_remove_tags(self, resource_id: str, keys: list[str]) -> None:
        """``DeleteTags`` (whatever the value) on one resource, with 1-based indexes."""
        self._tag_call("DeleteTags", resource_id, {k: None for k in keys})

    def _tag_call(self, action: str, resource_id: str, tags: dict[str, str | None]) -> None:
        params: dict[str, str] = {"Action": action, "ResourceId.1": resource_id}
        for i, (key, value) in enumerate(tags.items(), start=1):
            params[f"Tag.{i}.Key"] = key
            if value is not None:
                params[f"Tag.{i}.Value"] = value
        self.connection.request(self.path, params=params)  # type: ignore[attr-defined]


@lru_cache(maxsize=None)
def tolerant_ec2_driver(driver_cls: type[Any]) -> type[Any]:
    """A subclass of libcloud's EC2 driver class with the adjustments above."""
    conn_cls = driver_cls.connectionCls
    response_cls = type(f"Tolerant{conn_cls.responseCls.__name__}",
                        (_TolerantResponse, conn_cls.responseCls), {})
    tolerant_conn = type(f"Tolerant{conn_cls.__name__}", (conn_cls,), {"responseCls": response_cls})
    return type(f"Tolerant{driver_cls.__name__}", (_EC2Extras, driver_cls),
                {"connectionCls": tolerant_conn})
