BFFCommand.main()
