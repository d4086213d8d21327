"""Prefect flows that compose dsstar's tasks. The CLI uses only the public names below (and
those of `serving`)."""

from .alerts import ALERT_NAMES, ensure_alerts, find_notification_blocks

__all__ = ["ALERT_NAMES", "ensure_alerts", "find_notification_blocks"]
