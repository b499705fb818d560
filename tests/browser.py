"""The HTML reports' tests open the pages in headless Chromium: ``probe`` runs a script in a page
after it loads and returns the value the script leaves in ``window.probe`` (what a reader sees,
after the page's own scripts have run)."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any


def probe(chromium: str, page: Path, script: str, scratch: Path) -> Any:
    """Run ``script`` in a copy of ``page`` (written in ``scratch``); ``window.probe``'s value."""
    probed = scratch / f"probed-{page.stem}.html"
    probed.write_text(page.read_text().replace("</body>", f"""<script>
window.addEventListener('load', function () {{
  {script}
  var out = document.createElement('pre'); out.id = 'probe';
  out.textContent = JSON.stringify(window.probe); document.body.appendChild(out);
}});
</script></body>"""))
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", probed.as_uri()],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, "the page's script did not run:\n" + done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))
