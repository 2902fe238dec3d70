'use strict';
// Shared bits of the ali-ons compatibility scripts: argv parsing and client options.

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) {
      throw new Error(`unexpected argument ${arg}`);
    }
    const eq = arg.indexOf('=');
    if (eq > 0) {
      args[arg.slice(2, eq)] = arg.slice(eq + 1);
    } else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) {
      args[arg.slice(2)] = argv[++i];
    } else {
      args[arg.slice(2)] = true;
    }
  }
  return args;
}

// ali-ons asks for an httpclient (used only to fetch name-server addresses from an Aliyun
// endpoint, never when `nameSrv` is given) and, optionally, access keys: with keys it signs every
// request (AccessKey / Signature / OnsChannel ext fields), which an ACL-less broker must ignore.
function clientOptions(args) {
  const namesrv = args.namesrv || process.env.NAMESRV_ADDR;
  if (!namesrv) {
    throw new Error('--namesrv (or NAMESRV_ADDR) is required');
  }
  const options = {
    nameSrv: namesrv.split(';'),
    httpclient: { request() { throw new Error('no http name-server lookup in tests'); } },
    instanceName: args.instance || `compat-${process.pid}`,
    heartbeatBrokerInterval: Number(args['heartbeat-ms'] || 2000),
    rebalanceInterval: Number(args['rebalance-ms'] || 2000),
    persistConsumerOffsetInterval: Number(args['persist-ms'] || 1000),
    logger: {
      info(...items) { if (process.env.ALI_ONS_DEBUG) console.error('[ali-ons info]', ...items); },
      debug() {},
      warn(...items) { console.error('[ali-ons warn]', ...items); },
      error(...items) { console.error('[ali-ons error]', ...items); },
    },
  };
  // --access-key / --secret-key sign as another account (the ACL tests: a wrong secret).
  if (!args['no-acl-keys']) {
    options.accessKeyId = args['access-key'] || 'compat-access-key';
    options.accessKeySecret = args['secret-key'] || 'compat-secret-key';
  }
  return options;
}

function emit(record) {
  process.stdout.write(JSON.stringify(record) + '\n');
}

module.exports = { parseArgs, clientOptions, emit };
