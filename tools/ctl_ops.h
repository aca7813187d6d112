/* parleyctl: cmd_reload, cmd_drain, cmd_log_level, cmd_config_check. */
#ifndef PARLEY_TOOLS_CTL_OPS_H
#define PARLEY_TOOLS_CTL_OPS_H

int	cmd_reload(int, char **);
int	cmd_drain(int, char **);
int	cmd_log_level(int, char **);
int	cmd_config_check(int, char **);

#endif
