/* parleyctl knowledge: a project's knowledge graph (ctl_knowledge.c). */
#ifndef PARLEY_TOOLS_CTL_KNOWLEDGE_H
#define PARLEY_TOOLS_CTL_KNOWLEDGE_H

int	cmd_knowledge_export(int, char **);
int	cmd_knowledge_import(int, char **);

#endif
