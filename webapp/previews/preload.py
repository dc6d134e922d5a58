"""Imported by the preview fork server only: decoders and pymupdf loaded before any child is capped.

A child forked from the server inherits these modules and their shared libraries, so its
address-space cap is spent on pixels, not on loading libheif, LibRaw or MuPDF.
"""

import pillow_heif  # noqa: F401
import pymupdf  # noqa: F401
import rawpy  # noqa: F401
from PIL import Image

from webapp import imaging

imaging.register_heif()
Image.init()  # every format plug-in of Pillow, imported now rather than on first open
