"""What the console's pages read from the cluster, one function per page (or fragment): each takes
the cluster handle (``core.boundary.Cluster``) and returns what the page shows. Views parse the
request, call these (reads) or a command (``console.commands``, actions), and render: no view
imports the admin client or talks to the cluster itself."""
