"""Previews of a project's pages, pictures and PDFs, served by the app under a policy of their own.

A page the rojo wrote (HTML, `.page`) is shown as a page, not as source, but must never act as
the app: it is served from `/preview/<capability>/<path>` with a `sandbox` policy (no script,
an origin of its own, so no cookie of the app's and no call of its API) that lets it load
only the project's own files beside it, by their relative paths. The capability in the path
(`capability.py`, signed and short-lived, bound to a person and a project) stands for the
session, which a sandboxed page's requests do not carry; every request checks the person's
access again, so a removal ends it at once.
"""
