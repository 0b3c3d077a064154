#!/bin/sh
# novox-provisioner's postinst: the system user the service runs as. The service is not
# enabled: it needs its configuration first (/etc/novox-provisioner/provisioner.env).
set -e
if ! getent passwd novox-provisioner >/dev/null; then
	useradd --system --user-group --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin --comment "novox PostgreSQL provider" novox-provisioner
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
