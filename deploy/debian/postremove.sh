#!/bin/sh
# novox-provisioner's postrm: a purge takes the system user and the configuration folder too,
# leaving the machine as it was before the install (a file an operator added stays).
set -e
if [ "$1" = purge ]; then
	if getent passwd novox-provisioner >/dev/null; then
		userdel novox-provisioner >/dev/null 2>&1 || true
	fi
	if getent group novox-provisioner >/dev/null; then
		groupdel novox-provisioner >/dev/null 2>&1 || true
	fi
	# what dpkg purged leaves it empty; a file an operator added there (a CA) stays
	rmdir /etc/novox-provisioner 2>/dev/null || true
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
