extension WireConnection {
    /// One `GET` on a fresh connection to 127.0.0.1:`port`, closed afterwards.
    package static func get(port: Int, path: String, headers: [(String, String)] = []) throws -> WireResponse {
        let connection = try WireConnection(port: port)
        defer { connection.close() }
        return try connection.request("GET", path, headers: headers)
    }

    /// One `POST` of `body` on a fresh connection to 127.0.0.1:`port`, closed afterwards.
    package static func post(
        port: Int, path: String, body: [UInt8], headers: [(String, String)] = [("Content-Type", "application/json")]
    ) throws -> WireResponse {
        let connection = try WireConnection(port: port)
        defer { connection.close() }
        return try connection.request("POST", path, headers: headers, body: body)
    }

    /// Sends a JSON body (`Content-Type: application/json`) and reads the response.
    package func post(_ path: String, json: String, headers: [(String, String)] = []) throws -> WireResponse {
        try request("POST", path, headers: [("Content-Type", "application/json")] + headers, body: Array(json.utf8))
    }
}
