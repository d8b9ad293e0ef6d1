"""Serving: the server's command line and start-up, the compute gate (server), the streamed
answers (streaming, chat_stream), one answer for many identical requests (shared_answers) and
the page's static files under hashed URLs (assets)."""
