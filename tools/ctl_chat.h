/* parleyctl chat. */
#ifndef PARLEY_TOOLS_CTL_CHAT_H
#define PARLEY_TOOLS_CTL_CHAT_H

int	cmd_chat(int, char **);

#endif
