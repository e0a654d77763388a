"""Code analysis over parsed programs: AST nodes, flow, order, values, scopes, the API surface, block data."""
