#!/bin/sh
# novox-provisioner's prerm: the service stopped and disabled before its files go.
set -e
if [ "$1" = remove ] || [ "$1" = deconfigure ]; then
	if [ -d /run/systemd/system ]; then
		systemctl stop novox-provisioner.service >/dev/null 2>&1 || true
	fi
	if command -v systemctl >/dev/null; then
		systemctl disable novox-provisioner.service >/dev/null 2>&1 || true
	fi
fi
