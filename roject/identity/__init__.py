"""Who someone is: logins and their limits, sessions, API tokens, single sign-on."""
