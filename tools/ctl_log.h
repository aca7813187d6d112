/* parleyctl: cmd_log. */
#ifndef PARLEY_TOOLS_CTL_LOG_H
#define PARLEY_TOOLS_CTL_LOG_H

int	cmd_log(int, char **);

#endif
