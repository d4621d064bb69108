"""One client connection, from its hello to its close: ``lifecycle`` runs it, ``handshake`` lets it in and
starts it (resume or snapshot), the ``sender`` (its only task) sends history merged with live (a filtered
subscription's: ``view_sender``, its view's frames), the ``receiver`` handles its frames in the transport's
callback, ``ending`` says why it closes, and ``ack_budget`` how often a stream's clients are asked to ack."""
