"""The agent loop: steps, tool calls as they form, approvals, drafts, branches."""
