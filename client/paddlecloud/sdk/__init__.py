"""The SDK: the library a script (and paddlectl) uses to talk to the portal, with no CLI in it.

`session` (config, token cache, requests, retries, errors as `errors.PaddleCloudError`), `jobs`
(submit, wait, logs), `files` (the PFS: ls, cp with resumable uploads and downloads), `images`
(in-cluster builds), `job` (`PaddleJob`, the original SDK's names), `build_context` and `builders`
(local image builds). It imports only itself and `paddlecloud.contract`; each module loads its heavy
libraries (requests, tenacity, PyYAML) where they are used, so `paddlectl --help` stays fast.
"""
