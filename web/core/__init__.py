"""The request core: a request's query parsed and validated (params, request_state,
sampler_settings), what it may ask (limits), the section registry, the views that build and
render sections, the results kept between requests (cache) and the security headers."""
