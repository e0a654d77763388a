"""Plan -> artifacts: the Jinja2 renderers (:mod:`.design`), atomic writing (:mod:`.write`), the
CANNBot headings (:mod:`.headings`, shared with the validator, which must not load Jinja2) and the
text of the cost-model and golden reports (:mod:`.costmodel`, :mod:`.golden`)."""
