from builder.cli.app import main

main()
