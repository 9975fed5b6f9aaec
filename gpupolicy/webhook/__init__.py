"""The validating admission webhook (`gpupolicy serve`).

`review.review()` is the whole admission decision, a plain function; `app` is the HTTP shell
around it (FastAPI), `cluster_inventory` the list+watch caches that answer the `Inventory`
protocol from the Kubernetes API, `tls` the certificate reloading, `metrics` and `logs` what
operators read. Only `review`, `settings` and `kinds` are free of webhook-only dependencies.
"""
