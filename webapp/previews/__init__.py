"""Image previews decoded in capped child processes, away from the web process."""
