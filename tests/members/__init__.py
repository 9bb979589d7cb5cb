"""Access, members, invitations, project settings, live news."""
