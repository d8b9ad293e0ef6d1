"""Model state: the models an app offers and holds (offered, found, loaded, explainer), the
prompt's forward pass every section reads (forward), timings measured once (measured), what is
kept on disk between starts (disk_cache) and the other tokenizers' encodings (encodings)."""
