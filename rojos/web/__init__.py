"""The HTTP side of rojos: the API's routers, schemas and errors, the pages, the wire."""
