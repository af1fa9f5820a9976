// The tests also run the adapters on the previous major versions, installed under aliases.
declare module 'express4' {
  import express = require('express')
  export = express
}
declare module 'koa2' {
  import Koa = require('koa')
  export = Koa
}
