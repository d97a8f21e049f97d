"""The board runtime: what a board run imports, on PYNQ's Python 3.10.

:mod:`~fcircnn.runtime.image` (a compiled image as the host sees it and checks it),
:mod:`~fcircnn.runtime.driver` (the host driver over a backend: a PYNQ overlay or a
simulation), :mod:`~fcircnn.runtime.predict` (class scores of clips, on the golden model, the
RTL or the board) and :mod:`~fcircnn.runtime.board` (a deployment folder's ``run.py``).
"""
