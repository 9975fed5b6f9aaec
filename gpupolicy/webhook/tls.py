"""TLS for the webhook: one `SSLContext` whose certificate chain is reloaded when the files change.

cert-manager rotates a Secret by swapping the mounted files. The server keeps the same context
and calls `load_cert_chain` on it again: connections made after that get the new certificate,
open ones keep theirs. A new pair is first loaded into a scratch context from private copies, so
a half-written rotation (new certificate, old key) is refused and the old pair keeps serving.
"""

from __future__ import annotations

import logging
import shutil
import ssl
import tempfile
from pathlib import Path

from gpupolicy.webhook.logs import LOGGER, log

_log = logging.getLogger(LOGGER)


def _stamp(path: Path) -> tuple[int, int, int]:
    info = path.stat()  # follows the ..data symlinks of a mounted Secret
    return info.st_mtime_ns, info.st_size, info.st_ino


def _server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    return context


class ReloadingCertificate:
    def __init__(self, certfile: Path, keyfile: Path) -> None:
        self.certfile = certfile
        self.keyfile = keyfile
        self.context = _server_context()
        self.context.load_cert_chain(certfile, keyfile)
        self._stamps = (_stamp(certfile), _stamp(keyfile))
        self.reloads = 0

    def reload_if_changed(self) -> bool:
        """Reload when either file changed; True when the new pair is in use."""
        try:
            stamps = (_stamp(self.certfile), _stamp(self.keyfile))
        except OSError as exc:
            log(
                _log,
                logging.WARNING,
                "cannot stat the TLS files; keeping the current certificate",
                error=str(exc),
            )
            return False
        if stamps == self._stamps:
            return False
        with tempfile.TemporaryDirectory(prefix="gpupolicy-tls-") as scratch:
            cert_copy, key_copy = Path(scratch) / "tls.crt", Path(scratch) / "tls.key"
            try:
                shutil.copyfile(self.certfile, cert_copy)
                shutil.copyfile(self.keyfile, key_copy)
                key_copy.chmod(0o600)
                _server_context().load_cert_chain(cert_copy, key_copy)  # refuse a mismatched pair
                self.context.load_cert_chain(cert_copy, key_copy)
            except (OSError, ssl.SSLError) as exc:
                log(
                    _log,
                    logging.WARNING,
                    "new TLS files do not load yet; keeping the current certificate",
                    error=str(exc),
                )
                return False
        self._stamps = stamps
        self.reloads += 1
        log(_log, logging.INFO, "TLS certificate reloaded", certfile=str(self.certfile))
        return True
