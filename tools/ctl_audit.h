/* parleyctl audit: a session's audit trail (ctl_audit.c). */
#ifndef PARLEY_TOOLS_CTL_AUDIT_H
#define PARLEY_TOOLS_CTL_AUDIT_H

int	cmd_audit(int, char **);

#endif
