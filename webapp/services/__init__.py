"""Service functions shared by the API, the UI and the CLI (routes stay thin)."""
