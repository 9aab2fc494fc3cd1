"""Apache libcloud's providers (``cloud/providers.py``: ec2, gce, azure_arm, openstack, and the
in-process ``dummy``) as one :class:`~nodemanager.configuration.kinds.CloudKind`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodemanager.cloud.markets import market_problem
from nodemanager.cloud.port import PROVIDERS, image_required
from nodemanager.configuration.kinds import CloudKind

if TYPE_CHECKING:
    from nodemanager.cloud.port import CloudDriver
    from nodemanager.configuration.settings import Settings

__all__ = ["KIND"]


def _build(settings: Settings) -> CloudDriver:
    from nodemanager.cloud.libcloud_driver import LibcloudCloud
    return LibcloudCloud(settings.cloud, sizes=settings.core.sizes)


KIND = CloudKind(name="libcloud", drivers=PROVIDERS, in_process=frozenset({"dummy"}), build=_build,
                 image_required=image_required, market_problem=market_problem)
